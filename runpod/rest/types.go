package rest

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpugate/gpugate/internal/secret"
)

// Secret is a credential: it prints, logs and encodes as "[redacted]".
// Reveal returns the value.
type Secret = secret.Secret

// PodStatus is a pod's lifecycle status.
type PodStatus string

// Pod statuses, per the v2 PodStatus enum.
const (
	StatusProvisioning PodStatus = "PROVISIONING"
	StatusStarting     PodStatus = "STARTING"
	StatusRunning      PodStatus = "RUNNING"
	StatusExited       PodStatus = "EXITED"
	StatusError        PodStatus = "ERROR"
	StatusTerminated   PodStatus = "TERMINATED"
)

// Known reports whether s is one of the published statuses. An unknown
// status is unknown state: it never means dead, and never healthy.
func (s PodStatus) Known() bool {
	switch s {
	case StatusProvisioning, StatusStarting, StatusRunning, StatusExited, StatusError, StatusTerminated:
		return true
	}
	return false
}

// Final reports whether the pod's container can no longer become healthy
// (EXITED, ERROR, TERMINATED).
func (s PodStatus) Final() bool {
	return s == StatusExited || s == StatusError || s == StatusTerminated
}

// PodEnv is a pod's environment as the API returns it. It can hold the JIT
// runner config, so printing, logging or encoding it shows keys only.
type PodEnv map[string]string

// String lists the keys, values redacted.
func (e PodEnv) String() string {
	parts := slices.Sorted(maps.Keys(e))
	for i, k := range parts {
		parts[i] = k + "=" + secret.Redacted
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// Format prints String for every verb: %#v would otherwise print the
// values.
func (e PodEnv) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(e.String())) }

// LogValue lists the keys, values redacted.
func (e PodEnv) LogValue() slog.Value { return slog.StringValue(e.String()) }

// MarshalJSON encodes every value as "[redacted]".
func (e PodEnv) MarshalJSON() ([]byte, error) {
	m := make(map[string]string, len(e))
	for k := range e {
		m[k] = secret.Redacted
	}
	return json.Marshal(m)
}

// PodGPU is the GPU a pod was placed on.
type PodGPU struct {
	ID    string `json:"id"`
	Count int    `json:"count"`
}

// PodRuntime is present only while the container runs.
type PodRuntime struct {
	Uptime int `json:"uptime"` // seconds since the container started
}

// Pod is a pod record (GET /v2/pods/{id}).
type Pod struct {
	ID           string      `json:"id"`
	Name         string      `json:"name"`
	Image        string      `json:"image"`
	Status       PodStatus   `json:"status"`
	Cloud        string      `json:"cloud"`
	DataCenterID string      `json:"dataCenterId,omitempty"`
	CUDAVersion  string      `json:"cudaVersion,omitempty"` // reported by the host; "" when unknown
	GPU          *PodGPU     `json:"gpu,omitempty"`
	Cost         float64     `json:"cost"` // billed USD/hour; 0 when EXITED or TERMINATED
	Runtime      *PodRuntime `json:"runtime"`
	CreatedAt    time.Time   `json:"createdAt"`
	StartedAt    *time.Time  `json:"startedAt"` // nil before the container starts
	Env          PodEnv      `json:"env,omitempty"`
}

// wirePod decodes the fields of the published Pod schema that may be null.
type wirePod struct {
	Pod
	DataCenterID *string `json:"dataCenterId"`
	CUDAVersion  *string `json:"cudaVersion"`
}

func (w wirePod) pod() Pod {
	p := w.Pod
	if w.DataCenterID != nil {
		p.DataCenterID = *w.DataCenterID
	}
	if w.CUDAVersion != nil {
		p.CUDAVersion = *w.CUDAVersion
	}
	return p
}

// GPURequest is the gpu object of a create: one GPU type, a count, and a CUDA
// constraint (an open-ended floor or an exact set, never both).
type GPURequest struct {
	ID                  string   `json:"id"`
	Count               int      `json:"count,omitempty"`
	MinCUDAVersion      string   `json:"minCudaVersion,omitempty"`
	AllowedCUDAVersions []string `json:"allowedCudaVersions,omitempty"`
}

// CreatePodRequest is the body of POST /v2/pods. Secret parts (the JIT runner
// config, the startup command) are Secrets: printed, logged or encoded they
// show "[redacted]"; only the request on the wire carries them.
type CreatePodRequest struct {
	Name      string            `json:"name"`
	Image     string            `json:"image"`
	Env       map[string]string `json:"env,omitempty"`        // non-secret parameters and ownership tags
	SecretEnv map[string]Secret `json:"secret_env,omitempty"` // e.g. RUNNER_JIT_CONFIG
	Args      Secret            `json:"args,omitempty"`       // startup command
	Disk      int               `json:"disk,omitempty"`       // container disk, GB
	Cloud     string            `json:"cloud,omitempty"`      // SECURE or COMMUNITY
	GPU       GPURequest        `json:"gpu"`
	Ports     []string          `json:"ports,omitempty"`
}

// secrets lists the values that must never appear in a message.
func (r CreatePodRequest) secrets() []Secret {
	s := []Secret{r.Args}
	for _, v := range r.SecretEnv {
		s = append(s, v)
	}
	return s
}

// MaxPodEnv is how many environment variables RunPod lets a pod have
// ("up to 50 environment variables per Pod",
// https://docs.runpod.io/pods/templates/environment-variables).
const MaxPodEnv = 50

// CheckEnv refuses, before anything is sent, a request with more variables
// than a pod may have (MaxPodEnv), or a variable both plain and secret
// (ErrInvalidRequest). CreatePod checks it; a caller that creates many
// pods from one template checks it once, before the first.
func (r CreatePodRequest) CheckEnv() error {
	for k := range r.SecretEnv {
		if _, ok := r.Env[k]; ok {
			return fmt.Errorf("%w: env %s is set both plain and secret: set it once", ErrInvalidRequest, k)
		}
	}
	if n := len(r.Env) + len(r.SecretEnv); n > MaxPodEnv {
		return fmt.Errorf("%w: %d environment variables, over RunPod's %d per pod: drop template variables (a packed proof takes one per chunk; bake a large one into the image instead)", ErrInvalidRequest, n, MaxPodEnv)
	}
	return nil
}

// wireCreatePod is what is sent: env merged, secrets revealed.
type wireCreatePod struct {
	Name  string            `json:"name"`
	Image string            `json:"image"`
	Env   map[string]string `json:"env,omitempty"`
	Args  string            `json:"args,omitempty"`
	Disk  int               `json:"disk,omitempty"`
	Cloud string            `json:"cloud,omitempty"`
	GPU   GPURequest        `json:"gpu"`
	Ports []string          `json:"ports,omitempty"`
}

func (r CreatePodRequest) wire() wireCreatePod {
	w := wireCreatePod{Name: r.Name, Image: r.Image, Args: r.Args.Reveal(), Disk: r.Disk, Cloud: r.Cloud, GPU: r.GPU, Ports: r.Ports}
	if len(r.Env)+len(r.SecretEnv) > 0 {
		w.Env = make(map[string]string, len(r.Env)+len(r.SecretEnv))
		maps.Copy(w.Env, r.Env)
		for k, v := range r.SecretEnv {
			w.Env[k] = v.Reveal()
		}
	}
	return w
}

// Availability levels of the catalog.
const (
	AvailabilityNone   = "NONE"
	AvailabilityLow    = "LOW"
	AvailabilityMedium = "MEDIUM"
	AvailabilityHigh   = "HIGH"
)

// GPUType is one catalog entry (GET /v2/catalog/gpus).
type GPUType struct {
	ID             string  `json:"id"`
	Name           string  `json:"name"`
	MemoryGB       int     `json:"memory"`
	Secure         bool    `json:"secure"`
	Community      bool    `json:"community"`
	SecurePrice    float64 `json:"securePrice"`    // price.secure, USD/hour per GPU
	CommunityPrice float64 `json:"communityPrice"` // price.community
	Availability   string  `json:"availability,omitempty"`
}

type wireGPUType struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Memory       int    `json:"memory"`
	Secure       bool   `json:"secure"`
	Community    bool   `json:"community"`
	Availability string `json:"availability"`
	Price        struct {
		Secure    float64 `json:"secure"`
		Community float64 `json:"community"`
	} `json:"price"`
}

// CatalogQuery filters the catalog's availability and prices.
type CatalogQuery struct {
	Cloud          string // SECURE (default) or COMMUNITY
	Count          int    // GPUs per pod (default 1)
	MinCUDAVersion string // open-ended floor, e.g. "12.6"
}
