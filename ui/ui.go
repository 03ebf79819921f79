package ui

import (
	"context"
	"embed"
	"io/fs"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// MaxForwardBytes bounds the body of a forwarded call. The console's
// requests are a few hundred bytes (table names, offsets, a key); a larger
// body is refused with 413 before it is sent on.
const MaxForwardBytes = 64 << 10

// forwarded are the only calls /ui/node/<id>/ sends on: reads that a
// bucket's leader answers. Admin calls (any node answers them) and every
// write are not among them.
var forwarded = map[string]bool{
	"strom.v1.TabletService/DescribeBuckets": true,
	"strom.v1.TabletService/FetchLog":        true,
	"strom.v1.TabletService/ListOffsets":     true,
	"strom.v1.TabletService/Lookup":          true,
}

// Config is what the console needs from its node.
type Config struct {
	// NodeAddress returns the API address (host:port) of a node of the
	// cluster by id, "" when the node is unknown. Required.
	NodeAddress func(id int32) string
	// DialContext dials other nodes for forwarded calls; nil: a
	// net.Dialer with a 5 s timeout.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Handler returns the console's handler, to be mounted at Prefix ("/ui/")
// of the API mux; a GET of "/ui" itself should redirect there
// (http.RedirectHandler). It is safe for concurrent use.
//
//	GET  /ui/...                     the embedded assets (index.html at /ui/)
//	POST /ui/node/{id}/{service}/{method}  one of the forwarded reads, sent on to node id
func Handler(cfg Config) http.Handler {
	dial := cfg.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 5 * time.Second}).DialContext
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	mux := http.NewServeMux()
	static := http.StripPrefix(Prefix, http.FileServerFS(sub))
	mux.Handle("GET "+Prefix, noCache(static))
	mux.Handle("POST "+Prefix+"node/{id}/{service}/{method}", &forwarder{
		address: cfg.NodeAddress,
		proxy: &httputil.ReverseProxy{
			Rewrite:   func(*httputil.ProxyRequest) {}, // the URL is set by ServeHTTP
			Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second},
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				http.Error(w, "ui: cannot forward to the node at "+r.URL.Host+": "+err.Error(), http.StatusBadGateway)
			},
		},
	})
	return mux
}

// noCache makes the browser revalidate the assets, so a console open
// across an upgrade picks up the new binary's files.
func noCache(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

// forwarder sends one of the forwarded reads on to the node it names.
type forwarder struct {
	address func(id int32) string
	proxy   *httputil.ReverseProxy
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := r.PathValue("service") + "/" + r.PathValue("method")
	if !forwarded[method] {
		http.Error(w, "ui: "+method+" is not forwarded: the console forwards only DescribeBuckets, FetchLog, ListOffsets and Lookup", http.StatusNotFound)
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
	if err != nil {
		http.Error(w, "ui: node id "+strconv.Quote(r.PathValue("id"))+" is not a number", http.StatusBadRequest)
		return
	}
	addr := f.address(int32(id))
	if addr == "" {
		http.Error(w, "ui: node "+strconv.FormatInt(id, 10)+" is not known to this node's metadata", http.StatusNotFound)
		return
	}
	if r.ContentLength > MaxForwardBytes {
		http.Error(w, "ui: a forwarded call's body is limited to "+strconv.Itoa(MaxForwardBytes)+" bytes", http.StatusRequestEntityTooLarge)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxForwardBytes)
	out := r.Clone(r.Context())
	out.URL = &url.URL{Scheme: "http", Host: addr, Path: "/" + method}
	out.Host = addr
	out.RequestURI = ""
	f.proxy.ServeHTTP(w, out)
}
