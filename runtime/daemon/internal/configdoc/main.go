// Command configdoc writes daemon.ConfigDoc to the file named by its
// argument; `go generate ./runtime/daemon` runs it to refresh docs/configuration.md.
package main

import (
	"log"
	"os"

	"github.com/deltaflow/deltaflow/runtime/daemon"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: configdoc <output.md>")
	}
	if err := os.WriteFile(os.Args[1], []byte(daemon.ConfigDoc()), 0o644); err != nil {
		log.Fatal(err)
	}
}
