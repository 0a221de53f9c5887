package main

import (
	"context"
	"errors"
)

func runExport(ctx context.Context, m *Main, args []string) error {
	return errors.New("export: not implemented yet")
}
