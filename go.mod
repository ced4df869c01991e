module warehouse-etl

go 1.26.0

require (
	github.com/disintegration/imaging v1.6.2
	github.com/x448/float16 v0.8.4
	golang.org/x/image v0.47.0
	golang.org/x/sync v0.24.0
	golang.org/x/sys v0.49.0
)
