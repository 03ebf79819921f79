// Package protocol holds Apache Fluss 0.9.1's protocol tables as Go: the API
// keys with their version ranges (ApiKeys.java) and the error codes
// (Errors.java). The tables are generated from those files at tag
// v0.9.1-incubating (fluss/DESIGN.md); this file holds the lookups.
package protocol

import (
	"fmt"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "strom/fluss/gen/flusspb" // registers Fluss's messages for Messages
)

// APIKey is a Fluss API key, the int16 in every request header.
type APIKey int16

// APIInfo is one row of Fluss's ApiKeys table.
type APIInfo struct {
	Key  APIKey
	Name string // Fluss's enum name, e.g. "API_VERSIONS"
	// MinVersion and MaxVersion are the versions Fluss 0.9.1 supports.
	MinVersion, MaxVersion int16
	// Public is false for the keys Fluss uses only between its own servers.
	Public bool
}

// Info returns the row of key, false when Fluss 0.9.1 has no such key.
func Info(key APIKey) (APIInfo, bool) {
	i := int(key) - int(ApiVersions)
	if i < 0 || i >= len(apiKeys) || apiKeys[i].Key != key {
		return APIInfo{}, false
	}
	return apiKeys[i], true
}

// APIKeys returns a copy of Fluss 0.9.1's whole ApiKeys table in key order.
func APIKeys() []APIInfo { return append([]APIInfo(nil), apiKeys...) }

// String returns Fluss's name and id, e.g. "API_VERSIONS(1000)", or
// "UNKNOWN(<id>)" for a key Fluss 0.9.1 does not have.
func (k APIKey) String() string {
	if info, ok := Info(k); ok {
		return fmt.Sprintf("%s(%d)", info.Name, int16(k))
	}
	return fmt.Sprintf("UNKNOWN(%d)", int16(k))
}

// ErrorCode is a Fluss error code, ErrorResponse.error_code.
type ErrorCode int32

type errorInfo struct{ name, message string }

// String returns Fluss's name of the code, e.g. "TABLE_NOT_EXIST", or
// "UNKNOWN(<code>)" for a code Fluss 0.9.1 does not have.
func (c ErrorCode) String() string {
	if e, ok := errorCodes[c]; ok {
		return e.name
	}
	return fmt.Sprintf("UNKNOWN(%d)", int32(c))
}

// DefaultMessage returns Fluss's default message for the code (empty for None
// and for unknown codes).
func (c ErrorCode) DefaultMessage() string { return errorCodes[c].message }

// messageStem is the prefix of a key's message names where it is not the
// key's name in CamelCase (from the @RPC annotations of Fluss's gateways).
var messageStem = map[APIKey]string{
	GetMetadata:                "Metadata",
	GetFilesystemSecurityToken: "GetFileSystemSecurityToken",
}

// Messages returns new, empty request and response messages of key, as
// Fluss's gateways pair them (e.g. PRODUCE_LOG: ProduceLogRequest and
// ProduceLogResponse); false for a key Fluss 0.9.1 does not have.
func Messages(key APIKey) (req, resp proto.Message, ok bool) {
	i := int(key) - int(ApiVersions)
	if i < 0 || i >= len(apiKeys) || apiKeys[i].Key != key {
		return nil, nil, false
	}
	t := messageTypes()[i]
	if t[0] == nil {
		return nil, nil, false
	}
	return t[0].New().Interface(), t[1].New().Interface(), true
}

// messageTypes are the request and response message types of apiKeys[i]
// (nil when FlussApi.proto has none), found once: Messages runs for every
// request the listener reads, and building the names and looking them up
// in the registry each time was a few percent of a LOOKUP's CPU.
var messageTypes = sync.OnceValue(func() [][2]protoreflect.MessageType {
	out := make([][2]protoreflect.MessageType, len(apiKeys))
	for i, info := range apiKeys {
		stem := messageStem[info.Key]
		if stem == "" {
			for _, w := range strings.Split(strings.ToLower(info.Name), "_") {
				stem += strings.ToUpper(w[:1]) + w[1:]
			}
		}
		reqType, err1 := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("fluss." + stem + "Request"))
		respType, err2 := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("fluss." + stem + "Response"))
		if err1 == nil && err2 == nil {
			out[i] = [2]protoreflect.MessageType{reqType, respType}
		}
	}
	return out
})
