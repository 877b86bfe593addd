package deploy

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDockerfilesBuildStaticNonRootImages checks each Dockerfile's final
// stage: a distroless/static or scratch base, a numeric non-root user that
// matches the pods' runAsUser, the port the manifests use, an exec-form
// entrypoint and no RUN (there is no shell); and a CGO-free build.
func TestDockerfilesBuildStaticNonRootImages(t *testing.T) {
	t.Parallel()
	for _, b := range binaries {
		file := b.name + ".Dockerfile"
		if strings.HasPrefix(b.cmd, "services/") {
			file = "runner.Dockerfile"
		}
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join("docker", file))
			if err != nil {
				t.Fatal(err)
			}
			text := string(data)
			if !strings.Contains(text, "CGO_ENABLED=0") {
				t.Error("the build does not set CGO_ENABLED=0: the binary may not be static")
			}
			final := text[strings.LastIndex(text, "\nFROM "):]
			base := strings.Fields(final)[1]
			if !strings.HasPrefix(base, "gcr.io/distroless/static") && base != "scratch" {
				t.Errorf("final base %s is neither distroless/static nor scratch", base)
			}
			var user, expose string
			for _, line := range strings.Split(final, "\n") {
				f := strings.Fields(line)
				if len(f) < 2 {
					continue
				}
				switch f[0] {
				case "RUN":
					t.Errorf("final stage runs %q: it has no shell", line)
				case "USER":
					user = f[1]
				case "EXPOSE":
					expose = f[1]
				case "ENTRYPOINT":
					if !strings.HasPrefix(f[1], "[") {
						t.Errorf("ENTRYPOINT %q is not exec form", line)
					}
				}
			}
			uid, err := strconv.Atoi(strings.SplitN(user, ":", 2)[0])
			if err != nil || uid == 0 {
				t.Errorf("USER %q is not a numeric non-root uid", user)
			}
			if expose != strconv.Itoa(int(b.port)) {
				t.Errorf("EXPOSE %s, the manifests use %d", expose, b.port)
			}
			r := render(t, filepath.Join("k8s", "base"))
			if b.optional { // its component's overlay
				r = render(t, filepath.Join("k8s", "overlays", "prod-notify"))
			}
			sc := r.deployments[b.workload].Spec.Template.Spec.SecurityContext
			if sc == nil || sc.RunAsUser == nil || int(*sc.RunAsUser) != uid {
				t.Errorf("%s runAsUser does not match the image's USER %s", b.workload, user)
			}
		})
	}
}
