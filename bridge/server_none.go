//go:build nonatsserver

package bridge

// embeddedAvailable: this build cannot run the embedded server, so
// Config.Validate requires nats.url.
const embeddedAvailable = false

// startEmbedded fails in builds without the nats-server module (the
// container image, where NATS runs as its own service): about a sixth of
// the binary is the server.
func startEmbedded(Config, int) (embeddedServer, error) {
	return nil, ErrNoEmbeddedServer
}
