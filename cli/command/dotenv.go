package command

import (
	"bufio"
	"errors"
	"io/fs"
	"os"

	"github.com/realm-go/realm/pkg/dotenv"
)

// LoadDotEnv adds the KEY=value lines of ./.env (or of $DOTENV_CONFIG_PATH)
// to the process environment without overriding variables already set
// (cli.md §1.1). A missing file is not an error.
func LoadDotEnv() error {
	path := os.Getenv("DOTENV_CONFIG_PATH")
	if path == "" {
		path = ".env"
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := dotenv.ParseLine(sc.Text())
		if !ok {
			continue
		}
		if _, set := os.LookupEnv(key); !set {
			_ = os.Setenv(key, val)
		}
	}
	return sc.Err()
}
