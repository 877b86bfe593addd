package embedded

import "os"

// SetJournalSync replaces the group commit's fsync (tests hold, count or
// fail it); set before the first write.
func (s *Server) SetJournalSync(f func(*os.File) error) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.syncJournal = f
}
