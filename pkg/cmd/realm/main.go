// Command realm is Realm's command-line tool, a client of engine-svc.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/realm-go/realm/pkg/cli"
)

func main() {
	if err := cli.LoadDotEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "Error: reading .env: "+err.Error())
		os.Exit(cli.ExitRefused)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Env{})
	stop()
	os.Exit(code)
}
