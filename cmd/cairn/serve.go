package main

import (
	"context"
	"errors"
)

func runServe(ctx context.Context, m *Main, args []string) error {
	return errors.New("serve: not implemented yet")
}
