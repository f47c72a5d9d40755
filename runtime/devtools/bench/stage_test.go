package bench

import (
	"slices"
	"strings"
	"testing"
)

// A stage child gets the S3 secret key in its environment, never on its
// command line, which `ps` shows to every user of the host.
func TestStageSecretNotInArgs(t *testing.T) {
	a := stageArgs{stage: StageE2E, s3: s3Flags{endpoint: "minio:9000", accessKey: "k", secretKey: "s3cr3t"}}
	if args := strings.Join(a.args(), " "); strings.Contains(args, "s3cr3t") {
		t.Errorf("the stage child's arguments hold the secret key: %s", args)
	}
	if !slices.Contains(a.env(), "MINIO_SECRET_KEY=s3cr3t") {
		t.Errorf("the stage child's environment %v lacks the secret key", a.env())
	}
}
