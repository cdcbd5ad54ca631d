package dstacktest

import (
	"encoding/json"
	"strconv"
	"time"
)

// ts formats a time as dstack's pydantic serializer does.
func ts(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.999999Z07:00") }

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// fleetJSON is dstack's Fleet (core/models/fleets.py), every field as the
// server sends it.
func (s *Server) fleetJSON(p *project, f *fleet) map[string]any {
	var ssh any
	if f.ssh {
		hosts := make([]any, 0, len(f.hosts))
		for _, h := range f.hosts {
			hosts = append(hosts, h)
		}
		ssh = map[string]any{"user": "ubuntu", "port": nil, "identity_file": nil, "ssh_key": nil, "proxy_jump": nil, "hosts": hosts, "network": nil}
	}
	instances := make([]any, 0, len(f.instances))
	for _, in := range f.instances {
		instances = append(instances, instanceJSON(p, f, in))
	}
	return map[string]any{
		"id": f.id, "name": f.name, "project_name": p.name,
		"spec": map[string]any{
			"configuration_path": nil,
			"configuration": map[string]any{
				"env": map[string]any{}, "ssh_config": ssh, "nodes": nil, "placement": nilIfEmpty(f.placement), "resources": nil,
				"backends": nil, "regions": nil, "availability_zones": nil, "instance_types": nil, "spot_policy": nil, "retry": nil,
				"max_price": nil, "idle_duration": nil, "type": "fleet", "name": f.name, "reservation": nil, "blocks": 1, "tags": nil,
				"backend_options": nil,
			},
			"profile":     emptyProfile(),
			"autocreated": false,
		},
		"created_at": ts(f.created), "status": "active", "status_message": nil, "instances": instances,
	}
}

func emptyProfile() map[string]any {
	m := map[string]any{}
	for _, k := range profileKeys {
		m[k] = nil
	}
	m["name"], m["default"] = "", false
	return m
}

// instanceJSON is dstack's Instance (core/models/instances.py).
func instanceJSON(p *project, f *fleet, in *instance) map[string]any {
	busy := 0
	if in.job != nil {
		busy = 1
	}
	var finishedAt any
	if in.status == Terminated {
		finishedAt = ts(in.created)
	}
	return map[string]any{
		"id": in.id, "project_name": p.name, "backend": "remote",
		"instance_type": map[string]any{"name": "ssh", "resources": map[string]any{
			"cpu_arch": nil, "cpus": 72, "memory_mib": 131072, "gpus": []any{map[string]any{"name": "GH200", "memory_mib": 98304, "vendor": "nvidia"}},
			"spot": false, "disk": map[string]any{"size_mib": 1024000}, "description": "",
		}},
		"name": in.name, "fleet_id": f.id, "fleet_name": f.name, "instance_num": in.num, "job_name": nil,
		"hostname": nilIfEmpty(in.hostname), "status": in.status, "unreachable": in.unreachable, "health_status": "healthy",
		"termination_reason": nil, "termination_reason_message": nil, "created": ts(in.created), "finished_at": finishedAt,
		"region": "remote", "availability_zone": nil, "price": 0.0, "total_blocks": 1, "busy_blocks": busy, "gpu_driver": nil,
	}
}

// runJSON is dstack's Run (core/models/runs.py), with its jobs when
// includeJobs.
func (s *Server) runJSON(p *project, r *run, includeJobs bool) map[string]any {
	var spec any
	json.Unmarshal(r.raw, &spec)
	var fleet any
	if r.fleet != nil {
		fleet = map[string]any{"id": r.fleet.id, "name": r.fleet.name}
	}
	jobs := []any{}
	var latest any
	if includeJobs {
		for _, j := range r.jobs {
			sub := submissionJSON(r, j)
			jobs = append(jobs, map[string]any{"job_spec": jobSpecJSON(r, j), "job_submissions": []any{sub}, "job_connection_info": nil})
			if latest == nil {
				latest = sub
			}
		}
	}
	var deleted any = false
	if r.deleted {
		deleted = true
	}
	return map[string]any{
		"id": r.id, "project_name": p.name, "user": User, "fleet": fleet, "submitted_at": ts(r.submitted),
		"last_processed_at": ts(r.processed), "status": r.status, "status_message": r.status,
		"termination_reason": nilIfEmpty(r.termination), "run_spec": spec, "jobs": jobs, "latest_job_submission": latest,
		"cost": 0.0, "service": nil, "deployment_num": r.deployments, "error": nil, "deleted": deleted, "next_triggered_at": nil,
	}
}

func submissionJSON(r *run, j *job) map[string]any {
	var jpd any
	if j.inst != nil || j.hostname != "" {
		jpd = map[string]any{
			"backend": "remote", "base_backend": nil,
			"instance_type": map[string]any{"name": "ssh", "resources": map[string]any{"cpu_arch": nil, "cpus": 72, "memory_mib": 131072, "gpus": []any{}, "spot": false, "disk": map[string]any{"size_mib": 1024000}, "description": ""}},
			"instance_id":   "", "hostname": j.hostname, "internal_ip": nil, "public_ip_enabled": true, "instance_network": nil,
			"region": "remote", "availability_zone": nil, "reservation": nil, "price": 0.0, "username": "ubuntu", "ssh_port": 22,
			"dockerized": true, "ssh_proxy": nil, "backend_data": nil, "gpu_driver": nil,
		}
		if j.inst != nil {
			jpd.(map[string]any)["instance_id"] = j.inst.id
		}
	}
	var finishedAt any
	if finished(j.status) {
		finishedAt = ts(j.processed)
	}
	return map[string]any{
		"id": j.id, "submission_num": 0, "deployment_num": r.deployments, "submitted_at": ts(j.submitted),
		"last_processed_at": ts(j.processed), "finished_at": finishedAt, "inactivity_secs": nil, "status": j.status,
		"status_message": j.status, "termination_reason": nilIfEmpty(j.termination), "termination_reason_message": nil,
		"error": nil, "exit_status": nil, "job_provisioning_data": jpd, "job_runtime_data": nil, "probes": []any{},
		"image_pull_progress": nil,
	}
}

func jobSpecJSON(r *run, j *job) map[string]any {
	conf, _ := r.spec["configuration"].(map[string]any)
	commands := []any{}
	if r.typ == "task" {
		commands = append(commands, asList(conf["commands"])...)
	} else {
		commands = []any{"/bin/bash", "-i", "-c", "echo 'To connect via SSH, use: `ssh " + r.name + "`' && tail -f /dev/null"}
	}
	image, _ := conf["image"].(string)
	if image == "" {
		image = "dstackai/base:0.15-base-ubuntu24.04"
	}
	env := map[string]any{}
	for k, v := range envOf(conf["env"]) {
		env[k] = v
	}
	var maxDuration any
	if n, ok := conf["max_duration"].(json.Number); ok {
		maxDuration = n
	}
	return map[string]any{
		"app_specs": []any{}, "commands": commands, "env": env, "file_archives": []any{}, "home_dir": "/root",
		"image_name": image, "job_name": r.name + "-" + strconv.Itoa(j.num) + "-0", "job_num": j.num, "jobs_per_replica": r.nodes,
		"max_duration": maxDuration, "node_group_index": 0, "node_group_job_index": j.num, "node_group_name": "0",
		"privileged": false, "probes": []any{}, "registry_auth": nil, "replica_group": "0", "replica_num": 0,
		"repo_code_hash": nil, "repo_data": r.spec["repo_data"], "repo_dir": "/workflow", "repo_exists_action": nil,
		"requirements": map[string]any{
			"resources": map[string]any{"cpu": map[string]any{"arch": nil, "count": map[string]any{"min": 2, "max": nil}},
				"memory": map[string]any{"min": 8.0, "max": nil}, "disk": nil, "shm_size": nil,
				"gpu": map[string]any{"vendor": "nvidia", "name": nil, "count": map[string]any{"min": 0, "max": nil}, "memory": nil, "total_memory": nil, "compute_capability": nil}},
			"max_price": nil, "spot": nil, "reservation": nil, "multinode": r.nodes > 1, "backend_options": nil,
		},
		"retry": nil, "service_port": nil, "single_branch": false, "ssh_key": nil, "stop_duration": 300, "user": nil,
		"utilization_policy": nil, "volumes": []any{}, "working_dir": nil,
	}
}
