// Command ociserver serves an in-memory OCI registry that implements the Referrers API, which
// distribution v3 does not: cuelabs.dev/go/oci/ociregistry's ocimem behind its ociserver.
// It listens on -addr (loopback by default) and prints "listening on <host:port>" on stderr
// once it accepts connections; -version prints the module version stamped in at build time.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"cuelabs.dev/go/oci/ociregistry/ocimem"
	"cuelabs.dev/go/oci/ociregistry/ociserver"
)

// version is the cuelabs.dev/go/oci/ociregistry version, set with -ldflags -X main.version.
var version = "unknown"

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Printf("ociserver cuelabs.dev/go/oci/ociregistry %s\n", version)
		return
	}
	listener, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "listening on %s\n", listener.Addr())
	server := &http.Server{
		Handler:           ociserver.New(ocimem.New(), nil),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Fatal(server.Serve(listener))
}
