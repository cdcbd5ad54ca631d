package gate

import "strconv"

// The steps' outputs, named as the Action writes them to $GITHUB_OUTPUT:
// what one step hands on to the next (PublishInputs names the publish
// step's side).

// Outputs are the authorize step's outputs: head_sha and tested_ref (the
// reuse and publish steps' head-sha and tested-ref), pr, role, and
// local_gpu_validation, true when every paid step must be skipped.
func (a Authorization) Outputs() [][2]string {
	return [][2]string{{"head_sha", a.HeadSHA}, {"tested_ref", a.TestedRef}, {"pr", strconv.Itoa(a.PR)}, {"role", a.Role},
		{"local_gpu_validation", strconv.FormatBool(a.LocalValidation)}}
}

// Outputs are the reuse step's outputs: reuse, reason and, when a gate is
// reused, from_id and from_url (the publish step's reused-from-id and
// reused-from-url).
func (d Decision) Outputs() [][2]string {
	out := [][2]string{{"reuse", strconv.FormatBool(d.Reuse)}, {"reason", d.Reason}}
	if d.From != nil {
		out = append(out, [2]string{"from_id", strconv.FormatInt(d.From.ID, 10)}, [2]string{"from_url", d.From.URL})
	}
	return out
}

// Outputs are the recover step's outputs: ref, the branch the workflow
// was dispatched on, and, when the run was followed, its run_id,
// conclusion and url. Nothing was dispatched without a ref: no outputs.
func (r RecoverResult) Outputs() [][2]string {
	if r.Ref == "" {
		return nil
	}
	out := [][2]string{{"ref", r.Ref}}
	if r.Run.ID != 0 {
		out = append(out, [2]string{"run_id", strconv.FormatInt(r.Run.ID, 10)}, [2]string{"conclusion", r.Run.Conclusion}, [2]string{"url", r.Run.URL})
	}
	return out
}
