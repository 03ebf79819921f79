package raftmeta

import (
	"fmt"
	"strings"
)

// validatePath applies ZooKeeper's PathUtils.validatePath: absolute, no
// trailing slash except for "/", no empty, "." or ".." segments, no NUL and
// none of the characters ZooKeeper rejects (controls, U+007F..U+009F,
// U+D800..U+F8FF, U+FFF0..U+FFFF, and anything outside the BMP, which Java
// sees as surrogates). Invalid UTF-8 is rejected too.
func validatePath(p string) error {
	if p == "" {
		return fmt.Errorf("%w: path must not be empty", ErrBadArguments)
	}
	if p[0] != '/' {
		return fmt.Errorf("%w: path %q must start with /", ErrBadArguments, p)
	}
	if len(p) == 1 {
		return nil
	}
	if p[len(p)-1] == '/' {
		return fmt.Errorf("%w: path %q must not end with /", ErrBadArguments, p)
	}
	segStart := 1
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		seg := p[segStart:i]
		switch seg {
		case "":
			return fmt.Errorf("%w: path %q has an empty node name", ErrBadArguments, p)
		case ".", "..":
			return fmt.Errorf("%w: path %q is relative", ErrBadArguments, p)
		}
		segStart = i + 1
	}
	for i, r := range p {
		if r == 0 {
			return fmt.Errorf("%w: path %q contains NUL", ErrBadArguments, p)
		}
		// Invalid UTF-8 decodes as U+FFFD, inside the rejected U+FFF0..U+FFFF.
		if r <= 0x1f || (r >= 0x7f && r <= 0x9f) || (r >= 0xd800 && r <= 0xf8ff) || (r >= 0xfff0 && r <= 0xffff) || r > 0xffff {
			return fmt.Errorf("%w: path %q contains an invalid character at byte %d", ErrBadArguments, p, i)
		}
	}
	return nil
}

// validateCreatePath validates the path of a create; for a sequential create
// the suffix is appended later, so ZooKeeper validates path+"1" (which allows
// a trailing slash: "/a/" creates "/a/0000000000").
func validateCreatePath(p string, sequential bool) error {
	if sequential {
		if err := validatePath(p + "1"); err != nil {
			return fmt.Errorf("%w: path %q is invalid for a sequential create", ErrBadArguments, p)
		}
		return nil
	}
	return validatePath(p)
}

// splitPath returns the parent path and the last segment name. The parent of
// "/a" is "/". It expects a path that passed validation (or, for sequential
// creates, a base path whose parent is everything before the last slash).
func splitPath(p string) (parent, name string) {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/", p[i+1:]
	}
	return p[:i], p[i+1:]
}

// reservedPaths are ZooKeeper's special nodes that cannot be deleted.
var reservedPaths = map[string]bool{
	"/":                 true,
	"/zookeeper":        true,
	"/zookeeper/quota":  true,
	"/zookeeper/config": true,
}
