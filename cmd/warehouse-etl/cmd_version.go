package main

import (
	"context"
	"fmt"

	"warehouse-etl/pipeline"
	"warehouse-etl/transforms"
)

func runVersion(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "version", "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "%s\ndecoder: %s\n", pipeline.CodeVersion, transforms.DecoderIdentity())
	return nil
}
