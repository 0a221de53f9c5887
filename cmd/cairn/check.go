package main

import (
	"context"
	"errors"
)

func runCheck(ctx context.Context, m *Main, args []string) error {
	return errors.New("check: not implemented yet")
}
