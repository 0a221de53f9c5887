package main

import (
	"context"
	"errors"
)

func runSandbox(ctx context.Context, m *Main, args []string) error {
	return errors.New("sandbox: not implemented yet")
}
