// Command registry is the CNCF distribution registry (github.com/distribution/distribution/v3)
// with only what a local test registry needs: the filesystem and in-memory storage drivers, and
// htpasswd and token authentication. The upstream cmd/registry also links the cloud storage
// drivers, which would triple the build for nothing used here.
package main

import (
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/auth/token"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	// Execute reports its own errors and exits non-zero on them.
	_ = registry.RootCmd.Execute()
}
