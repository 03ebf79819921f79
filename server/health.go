package server

// ReadyURL is the URL of the node's readiness check (/readyz) as the node's
// own host reaches it: api.listen with an unspecified host (":9123",
// "0.0.0.0:9123") replaced by 127.0.0.1. `strom healthcheck`, a container's
// HEALTHCHECK, GETs it.
func (c Config) ReadyURL() string {
	return "http://" + advertised(c.Listen, "") + "/readyz"
}
