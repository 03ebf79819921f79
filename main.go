// Command strom runs a Strom node (strom server) and is the command-line
// client of a Strom cluster.
package main

import "strom/cli"

func main() { cli.Execute() }
