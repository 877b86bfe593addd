package embedded

import "os"

// SetJournalSync replaces the group commit's fsync (tests hold, count or
// fail it); set before the first write.
func (s *Server) SetJournalSync(f func(*os.File) error) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.syncJournal = f
}

// SetMaxPending lowers the reply bytes a connection may hold (conn.go).
func (s *Server) SetMaxPending(n int) { s.maxPending.Store(int64(n)) }

// Commands is how many commands the server has run.
func (s *Server) Commands() int { return s.m.CommandCount() }
