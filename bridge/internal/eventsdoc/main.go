// Command eventsdoc writes bridge.EventsDoc to the file named by its
// argument; `go generate ./bridge` runs it to refresh docs/events.md.
package main

import (
	"log"
	"os"

	"github.com/deltaflow/deltaflow/bridge"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: eventsdoc <output.md>")
	}
	if err := os.WriteFile(os.Args[1], []byte(bridge.EventsDoc()), 0o644); err != nil {
		log.Fatal(err)
	}
}
