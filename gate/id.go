package gate

import (
	"regexp"
	"strings"
)

// Kind is what a gate publication records.
type Kind string

// Gate kinds.
const (
	KindPaid        Kind = "paid"         // validated on a paid pod
	KindReused      Kind = "reused"       // an earlier paid or reused success for the same tested ref
	KindFailed      Kind = "failed"       // validation failed
	KindNotRequired Kind = "not-required" // the classifier said GPU validation is unnecessary
	KindLocal       Kind = "local"        // a maintainer's local GPU validation, relayed
	KindSkipped     Kind = "skipped"      // the paid path did not run (e.g. a labelled PR)
)

const (
	paidPrefix  = "runpod-gpu-gate:v1:"
	localPrefix = "local-gpu-gate:v1:"
)

// DefaultCheckName is the required check's default name.
const DefaultCheckName = "CI GPU gate"

// ExternalID is what a gate check run records in its external_id.
type ExternalID struct {
	Ref  string // the tested ref: the pinned merge SHA, or the dispatched commit
	Kind Kind
}

// String formats runpod-gpu-gate:v1:<ref>:<kind>, or
// local-gpu-gate:v1:<sha> for KindLocal.
func (id ExternalID) String() string {
	if id.Kind == KindLocal {
		return localPrefix + id.Ref
	}
	return paidPrefix + id.Ref + ":" + string(id.Kind)
}

var shaPattern = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)

// IsSHA reports whether s is a full lowercase SHA-1 or SHA-256 commit ID.
func IsSHA(s string) bool { return shaPattern.MatchString(s) }

// ParseExternalID accepts exactly runpod-gpu-gate:v1:<sha>:<kind> (kind
// paid, reused, failed, not-required or skipped) and local-gpu-gate:v1:<sha>,
// with full commit SHAs, and rejects everything else.
func ParseExternalID(s string) (ExternalID, bool) {
	if sha, ok := strings.CutPrefix(s, localPrefix); ok {
		if IsSHA(sha) {
			return ExternalID{Ref: sha, Kind: KindLocal}, true
		}
		return ExternalID{}, false
	}
	rest, ok := strings.CutPrefix(s, paidPrefix)
	if !ok {
		return ExternalID{}, false
	}
	ref, kind, ok := strings.Cut(rest, ":")
	if !ok || !IsSHA(ref) {
		return ExternalID{}, false
	}
	switch k := Kind(kind); k {
	case KindPaid, KindReused, KindFailed, KindNotRequired, KindSkipped:
		return ExternalID{Ref: ref, Kind: k}, true
	}
	return ExternalID{}, false
}
