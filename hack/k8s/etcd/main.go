// Command etcd is the etcd server, built from its Go module for the local control plane.
// The server module has no installable main package, so this wrapper calls the one etcd ships.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
