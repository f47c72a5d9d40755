// Command configdoc writes runtime.ConfigDoc to the file named by its
// argument; `go generate ./runtime` runs it to refresh docs/configuration.md.
package main

import (
	"log"
	"os"

	"github.com/deltaflow/deltaflow/runtime"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: configdoc <output.md>")
	}
	if err := os.WriteFile(os.Args[1], []byte(runtime.ConfigDoc()), 0o644); err != nil {
		log.Fatal(err)
	}
}
