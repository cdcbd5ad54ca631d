package runpod

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ErrImage is matched by every ResolveImage failure. Provisioning must stop
// before any GPU is allocated.
var ErrImage = errors.New("runpod: cannot resolve the runner image")

// imageResolver pins image tags to digests through the OCI distribution
// API, with github.com/google/go-containerregistry: a HEAD on the manifest
// (manifest lists and OCI indexes accepted), a GET when the registry sends
// no digest on HEAD, and the registry's token flow with the keychain's
// credentials, so private runner images resolve too.
type imageResolver struct {
	HTTP      *http.Client   // nil: a client with a 30-second timeout
	PlainHTTP bool           // talk plain HTTP (a test registry)
	Keychain  authn.Keychain // nil: authn.DefaultKeychain (docker login's config, DOCKER_CONFIG)
}

// ResolveImage pins a runner image reference to its digest,
// name:tag@sha256:<digest>, so that every candidate pod runs the same
// image: through the OCI distribution API (a HEAD on the manifest, a GET
// when the registry sends no digest on HEAD), with the credentials docker
// login saved (DOCKER_CONFIG), so private images resolve too. A reference
// already pinned is returned as it is; one without a tag is the latest
// tag. Its errors match ErrImage and never carry a registry token.
func ResolveImage(ctx context.Context, ref string) (string, error) {
	return (&imageResolver{}).Resolve(ctx, ref)
}

// Resolve returns name:tag@sha256:<digest> for ref. A ref already pinned to
// a digest is returned as it is; a ref without a tag is the latest tag.
// Errors never carry a registry token.
func (r *imageResolver) Resolve(ctx context.Context, ref string) (string, error) {
	var opts []name.Option
	if r.PlainHTTP {
		opts = append(opts, name.Insecure)
	}
	parsed, err := name.ParseReference(ref, append(opts, name.StrictValidation)...)
	if err != nil {
		// Without a tag, StrictValidation refuses the implicit latest.
		parsed, err = name.ParseReference(ref, opts...)
	}
	if err != nil {
		return "", fmt.Errorf("%w: image reference %q: %w", ErrImage, ref, err)
	}
	tag, ok := parsed.(name.Tag)
	if !ok {
		return ref, nil // pinned to a digest already
	}
	hc := r.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	keychain := r.Keychain
	if keychain == nil {
		keychain = authn.DefaultKeychain
	}
	transport := hc.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain), remote.WithTransport(timeout{transport, hc.Timeout})}
	pinned := func(digest string) string { return tag.Context().Name() + ":" + tag.TagStr() + "@" + digest }
	desc, headErr := remote.Head(tag, ropts...)
	if headErr == nil && desc.Digest.Hex != "" {
		return pinned(desc.Digest.String()), nil
	}
	got, err := remote.Get(tag, ropts...) // some registries send no digest on HEAD
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrImage, tag.String(), scrubToken(err))
	}
	return pinned(got.Digest.String()), nil
}

// timeout bounds each registry request to the client's timeout.
type timeout struct {
	next http.RoundTripper
	d    time.Duration
}

func (t timeout) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.d <= 0 {
		return t.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.d)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	body interface {
		Read([]byte) (int, error)
		Close() error
	}
	cancel context.CancelFunc
}

func (c cancelOnClose) Read(p []byte) (int, error) { return c.body.Read(p) }
func (c cancelOnClose) Close() error               { err := c.body.Close(); c.cancel(); return err }

// scrubToken keeps a registry's error text but drops any bearer value it
// may quote.
func scrubToken(err error) error {
	msg := err.Error()
	if i := strings.Index(strings.ToLower(msg), "bearer "); i >= 0 {
		return errors.New(msg[:i] + "Bearer <redacted>")
	}
	return err
}
