// Command deltaflow streams Kafka into a Delta Lake table and maintains it.
// See `deltaflow help`.
package main

import (
	"context"
	"os"

	"github.com/deltaflow/deltaflow/runtime/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
