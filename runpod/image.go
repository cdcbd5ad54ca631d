package runpod

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// ErrImage is matched by every ResolveImage failure. Provisioning must stop
// before any GPU is allocated.
var ErrImage = errors.New("runpod: cannot resolve the runner image")

// ImageRef is a parsed image reference.
type ImageRef struct {
	Name       string // as written, without tag or digest (e.g. ghcr.io/actions/actions-runner)
	Registry   string // host[:port]; Docker Hub is registry-1.docker.io
	Repository string // path in the registry (library/ added for Docker Hub)
	Tag        string // "latest" when absent
	Digest     string // sha256:<hex> when pinned
}

// String is name:tag@digest, or name:tag when not pinned.
func (r ImageRef) String() string {
	s := r.Name + ":" + r.Tag
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

var (
	digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	pathComponent = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	tagPattern    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

// ParseImageRef parses [host[:port]/]path[:tag][@sha256:digest].
func ParseImageRef(ref string) (ImageRef, error) {
	bad := func(why string) (ImageRef, error) {
		return ImageRef{}, fmt.Errorf("%w: image reference %q: %s", ErrImage, ref, why)
	}
	name, digest, hasDigest := strings.Cut(ref, "@")
	if hasDigest && !digestPattern.MatchString(digest) {
		return bad("the digest must be sha256:<64 hex digits>")
	}
	tag := ""
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i+1:]
		if !tagPattern.MatchString(tag) {
			return bad("invalid tag")
		}
	}
	if name == "" {
		return bad("empty name")
	}
	parts := strings.Split(name, "/")
	host := "docker.io"
	if len(parts) > 1 && (strings.ContainsAny(parts[0], ".:") || parts[0] == "localhost") {
		host, parts = parts[0], parts[1:]
	}
	for _, p := range parts {
		if !pathComponent.MatchString(p) {
			return bad(fmt.Sprintf("path component %q is not lowercase letters, digits and separators", p))
		}
	}
	repo := strings.Join(parts, "/")
	registry := host
	if host == "docker.io" {
		registry = "registry-1.docker.io"
		if len(parts) == 1 {
			repo = "library/" + repo
		}
	}
	if tag == "" {
		tag = "latest"
	}
	return ImageRef{Name: name, Registry: registry, Repository: repo, Tag: tag, Digest: digest}, nil
}

// ImageResolver pins image tags to digests through the OCI distribution API.
type ImageResolver struct {
	HTTP      *http.Client // nil: a client with a 30-second timeout
	PlainHTTP bool         // talk plain HTTP (a test registry)
}

// ResolveImage pins ref with a default ImageResolver.
func ResolveImage(ctx context.Context, ref string) (string, error) {
	return (&ImageResolver{}).Resolve(ctx, ref)
}

var manifestTypes = strings.Join([]string{
	"application/vnd.oci.image.index.v1+json",
	"application/vnd.docker.distribution.manifest.list.v2+json",
	"application/vnd.oci.image.manifest.v1+json",
	"application/vnd.docker.distribution.manifest.v2+json",
}, ", ")

// Resolve returns name:tag@sha256:<digest> for ref: HEAD on the manifest
// (manifest lists and OCI indexes accepted), with the anonymous bearer
// token flow when the registry asks for it, reading Docker-Content-Digest
// (or hashing the manifest when a registry omits it). A ref already pinned
// to a digest is returned as it is.
func (r *ImageResolver) Resolve(ctx context.Context, ref string) (string, error) {
	img, err := ParseImageRef(ref)
	if err != nil {
		return "", err
	}
	if img.Digest != "" {
		return img.String(), nil
	}
	hc := r.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	scheme := "https"
	if r.PlainHTTP {
		scheme = "http"
	}
	manifest := fmt.Sprintf("%s://%s/v2/%s/manifests/%s", scheme, img.Registry, img.Repository, img.Tag)
	token := Secret("")
	for _, method := range []string{http.MethodHead, http.MethodGet} {
		resp, err := r.manifest(ctx, hc, method, manifest, token)
		if err != nil {
			return "", err
		}
		if resp.StatusCode == http.StatusUnauthorized && token == "" {
			challenge := resp.Header.Get("WWW-Authenticate")
			resp.Body.Close()
			if token, err = r.token(ctx, hc, challenge, img); err != nil {
				return "", err
			}
			if resp, err = r.manifest(ctx, hc, method, manifest, token); err != nil {
				return "", err
			}
		}
		digest, err := readDigest(resp, method)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %w", ErrImage, img.String(), err)
		}
		if digest != "" {
			img.Digest = digest
			return img.String(), nil
		}
	}
	return "", fmt.Errorf("%w: %s: the registry returned no digest", ErrImage, img.String())
}

func (r *ImageResolver) manifest(ctx context.Context, hc *http.Client, method, u string, token Secret) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrImage, err)
	}
	req.Header.Set("Accept", manifestTypes)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token.Reveal())
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrImage, method, u, err)
	}
	return resp, nil
}

// readDigest returns the manifest's digest, or "" when a HEAD response
// carried none (the caller then GETs the manifest).
func readDigest(resp *http.Response, method string) (string, error) {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s manifest: status %d", method, resp.StatusCode)
	}
	if d := resp.Header.Get("Docker-Content-Digest"); d != "" {
		if !digestPattern.MatchString(d) {
			return "", fmt.Errorf("Docker-Content-Digest %q is not sha256:<64 hex>", d)
		}
		return d, nil
	}
	if method == http.MethodHead {
		return "", nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", fmt.Errorf("read manifest: %w", err)
	}
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// token runs the anonymous bearer token flow for a challenge.
func (r *ImageResolver) token(ctx context.Context, hc *http.Client, header string, img ImageRef) (Secret, error) {
	scheme, params, err := ParseChallenge(header)
	if err != nil || !strings.EqualFold(scheme, "Bearer") || params["realm"] == "" {
		return "", fmt.Errorf("%w: %s: the registry asked for authentication this resolver cannot give (%q)", ErrImage, img.String(), header)
	}
	realm, err := url.Parse(params["realm"])
	if err != nil || (realm.Scheme != "https" && !(r.PlainHTTP && realm.Scheme == "http")) {
		return "", fmt.Errorf("%w: token realm %q is not an https URL", ErrImage, params["realm"])
	}
	q := realm.Query()
	if s := params["service"]; s != "" {
		q.Set("service", s)
	}
	scope := params["scope"]
	if scope == "" {
		scope = "repository:" + img.Repository + ":pull"
	}
	q.Set("scope", scope)
	realm.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, realm.String(), nil)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrImage, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: token request: %w", ErrImage, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%w: token request: status %d", ErrImage, resp.StatusCode)
	}
	var tok struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&tok); err != nil {
		return "", fmt.Errorf("%w: token response: %w", ErrImage, err)
	}
	t := tok.Token
	if t == "" {
		t = tok.AccessToken
	}
	if t == "" {
		return "", fmt.Errorf("%w: the token response has no token", ErrImage)
	}
	return Secret(t), nil
}

// ParseChallenge parses one WWW-Authenticate challenge:
// scheme key="value", key=token, ... (RFC 9110 §11.6.1).
func ParseChallenge(header string) (scheme string, params map[string]string, err error) {
	header = strings.TrimSpace(header)
	scheme, rest, _ := strings.Cut(header, " ")
	if scheme == "" || strings.ContainsAny(scheme, "=,\"") {
		return "", nil, fmt.Errorf("runpod: WWW-Authenticate %q: no auth scheme", header)
	}
	params = map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; {
		key, after, ok := strings.Cut(rest, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		if !ok || key == "" || strings.ContainsAny(key, " ,\"") {
			return "", nil, fmt.Errorf("runpod: WWW-Authenticate %q: malformed parameter", header)
		}
		after = strings.TrimLeft(after, " ")
		var value string
		if strings.HasPrefix(after, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(after) && after[i] != '"'; i++ {
				if after[i] == '\\' && i+1 < len(after) {
					i++
				}
				b.WriteByte(after[i])
			}
			if i >= len(after) {
				return "", nil, fmt.Errorf("runpod: WWW-Authenticate %q: unterminated quoted string", header)
			}
			value, rest = b.String(), after[i+1:]
		} else {
			value, rest, _ = strings.Cut(after, ",")
			value = strings.TrimSpace(value)
			rest = "," + rest
		}
		params[key] = value
		rest = strings.TrimSpace(rest)
		if rest != "" {
			if rest[0] != ',' {
				return "", nil, fmt.Errorf("runpod: WWW-Authenticate %q: parameters must be separated by commas", header)
			}
			rest = strings.TrimSpace(rest[1:])
		}
	}
	return scheme, params, nil
}
