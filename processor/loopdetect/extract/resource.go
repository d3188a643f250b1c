package extract

import "github.com/otelcol-loop/otelcol-loop/internal/target"

// The spans of a batch mostly share a few resources (one per agent
// process), and Extract reads the same resource attributes for each: the
// target, and the session and agent keys a span does not carry itself. A
// caller that hands Extract the spans of one resource in a row says so
// with Scratch.ShareResource, and Extract reads the resource once for them.

// resourceMemo holds what Extract read from the shared resource.
type resourceMemo struct {
	on bool       // between ShareResource and ForgetResource
	x  *Extractor // whose key lists the values were read with
	// target is valid when hasTarget.
	target         target.Process
	hasTarget      bool
	session, agent resourceFirst
}

// resourceFirst is the resource half of firstTextOrResource for one key
// list, valid when read: the text of the first key present, and that key.
type resourceFirst struct {
	text string
	key  string
	ok   bool
	read bool
}

// ShareResource tells Extract that the spans it is handed with sc until the
// next ShareResource or ForgetResource call share one resource: it reads
// the resource's attributes once for all of them.
func (sc *Scratch) ShareResource() { sc.res = resourceMemo{on: true} }

// ForgetResource ends ShareResource and drops the values read from the
// resource, so they do not outlive the batch they point into.
func (sc *Scratch) ForgetResource() { sc.res = resourceMemo{} }

// resource returns the memo for spans read with x, or nil when the caller
// did not declare a shared resource.
func (sc *Scratch) resource(x *Extractor) *resourceMemo {
	m := &sc.res
	if !m.on {
		return nil
	}
	if m.x != x {
		*m = resourceMemo{on: true, x: x}
	}
	return m
}

// SupervisorInstanceAttr is the resource attribute in which loopsupervisor
// repeats the service.instance.id it gives its agent; it is read in its
// place when present.
const SupervisorInstanceAttr = "loopsupervisor.instance.id"

// target reads the agent's identity from the resource of s.
func processOf[S Span](s S, m *resourceMemo) target.Process {
	if m != nil && m.hasTarget {
		return m.target
	}
	var t target.Process
	if v, ok := s.ResourceAttr("service.name"); ok {
		t.ServiceName = v.Text()
	}
	if v, ok := s.ResourceAttr("service.instance.id"); ok {
		t.ServiceInstanceID = v.Text()
	}
	if v, ok := s.ResourceAttr(SupervisorInstanceAttr); ok && v.Text() != "" {
		// The supervisor's copy wins: an agent that sets its own
		// service.instance.id over the environment's (OpenCode 1.18.33
		// puts a random run id there) still names the id a kill needs.
		t.ServiceInstanceID = v.Text()
	}
	if v, ok := s.ResourceAttr("host.name"); ok {
		t.HostName = v.Text()
	}
	if v, ok := s.ResourceAttr("process.pid"); ok {
		if f, ok := v.Number(); ok {
			t.PID = int64(f)
		}
	}
	if m != nil {
		m.target, m.hasTarget = t, true
	}
	return t
}

// resourceFirstOf returns the text of the first key of slots the resource
// of s has, and that key, read once per shared resource when memo is not
// nil.
func resourceFirstOf[S Span](s S, keys []string, slots []int32, memo *resourceFirst) (string, string, bool) {
	if memo != nil && memo.read {
		return memo.text, memo.key, memo.ok
	}
	var r resourceFirst
	for _, sl := range slots {
		k := keys[sl]
		if v, ok := s.ResourceAttr(k); ok {
			r = resourceFirst{text: v.Text(), key: k, ok: true}
			break
		}
	}
	if memo != nil {
		r.read = true
		*memo = r
	}
	return r.text, r.key, r.ok
}

// sessionMemo is the memo of the session keys' resource half, or nil.
func (m *resourceMemo) sessionMemo() *resourceFirst {
	if m == nil {
		return nil
	}
	return &m.session
}

// agentMemo is the memo of the agent keys' resource half, or nil.
func (m *resourceMemo) agentMemo() *resourceFirst {
	if m == nil {
		return nil
	}
	return &m.agent
}
