// Package deps pins modules that packages under construction will import;
// it is removed once they do.
package deps

import (
	_ "github.com/apache/arrow-go/v18/arrow/array"
	_ "github.com/apache/arrow-go/v18/parquet/compress"
	_ "github.com/apache/arrow-go/v18/parquet/pqarrow"
	_ "github.com/cespare/xxhash/v2"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/pierrec/lz4/v4"
	_ "github.com/ulikunitz/xz"
)
