package main

import (
	"context"
	"errors"
)

func runBuild(ctx context.Context, m *Main, args []string) error {
	return errors.New("build: not implemented yet")
}
