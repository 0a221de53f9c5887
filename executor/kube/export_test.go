package kube

// WaitCalls reports how many lists and watches action=wait has started.
func WaitCalls(r *Runner) (lists, watches int64) { return r.waitLists.Load(), r.waitWatches.Load() }
