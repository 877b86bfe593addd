package store

// QueuedCommits is how many commits wait behind the batch being sent (0
// without Options.PipelineCommits): tests hold a batch and queue the next.
func (r *Redis) QueuedCommits() int {
	if r.pipe == nil {
		return 0
	}
	r.pipe.mu.Lock()
	defer r.pipe.mu.Unlock()
	return len(r.pipe.queue)
}
