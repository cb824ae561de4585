// Command volume-provisioner is the node's dynamic provisioner for the default
// StorageClass "standard" (provisioner perfops.local/node-dir): for every
// PersistentVolumeClaim waiting for it, it makes a directory under --dir and a
// `local` PersistentVolume bound to that claim, pinned to the node; when a
// claim is deleted (its volume Released) it removes both.
//
// Why not the controller manager's hostPath provisioner: it makes each
// directory root-owned 0750, and the kubelet never changes the ownership of a
// hostPath volume, so a pod running as a non-root user cannot write its own
// claim, whatever its securityContext.fsGroup says. The kubelet does apply
// fsGroup to `local` volumes (as to CSI block volumes, the usual case on a
// real cluster): the group becomes fsGroup, with write and setgid. So here, as
// on such a cluster, a non-root pod writes its volume only when it asks for
// it with fsGroup. The directories stay root-owned 0750 when made.
//
// It talks to the API server with the admin token over HTTPS, polling twice a
// second (a watch would be quicker; claims are rare here). Standard library
// only, like probe/.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	provisioner = "perfops.local/node-dir"
	annProvider = "volume.kubernetes.io/storage-provisioner"
	annBeta     = "volume.beta.kubernetes.io/storage-provisioner"
	annBy       = "pv.kubernetes.io/provisioned-by"
)

type meta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	UID         string            `json:"uid,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type claim struct {
	Metadata meta `json:"metadata"`
	Spec     struct {
		AccessModes      []string `json:"accessModes"`
		StorageClassName string   `json:"storageClassName"`
		VolumeName       string   `json:"volumeName"`
		Resources        struct {
			Requests map[string]string `json:"requests"`
		} `json:"resources"`
	} `json:"spec"`
	Status struct {
		Phase string `json:"phase"`
	} `json:"status"`
}

type volume struct {
	Metadata meta `json:"metadata"`
	Spec     struct {
		Local *struct {
			Path string `json:"path"`
		} `json:"local"`
		PersistentVolumeReclaimPolicy string `json:"persistentVolumeReclaimPolicy"`
	} `json:"spec"`
	Status struct {
		Phase string `json:"phase"`
	} `json:"status"`
}

type client struct {
	url, token string
	http       *http.Client
}

func (c *client) do(method, path string, body any, out any) (int, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.url+path, r)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(data, out)
	}
	return resp.StatusCode, nil
}

func main() {
	api := flag.String("api", "", "API server URL")
	tokenFile := flag.String("token-file", "", "bearer token file")
	caFile := flag.String("ca-file", "", "CA bundle of the API server")
	node := flag.String("node", "", "node name the volumes are pinned to")
	dir := flag.String("dir", "", "folder the volumes' directories go in")
	class := flag.String("class", "standard", "StorageClass served (its provisioner must be "+provisioner+")")
	flag.Parse()
	if *api == "" || *tokenFile == "" || *caFile == "" || *node == "" || !filepath.IsAbs(*dir) {
		log.Fatal("usage: volume-provisioner --api URL --token-file F --ca-file F --node NAME --dir /ABS/DIR")
	}
	token, err := os.ReadFile(*tokenFile)
	if err != nil {
		log.Fatal(err)
	}
	ca, err := os.ReadFile(*caFile)
	if err != nil {
		log.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		log.Fatalf("%s holds no certificate", *caFile)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Fatal(err)
	}
	c := &client{url: strings.TrimRight(*api, "/"), token: strings.TrimSpace(string(token)), http: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	log.Printf("serving StorageClass %s (%s) with local volumes under %s on node %s", *class, provisioner, *dir, *node)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := provision(c, *class, *node, *dir); err != nil {
			log.Print(err)
		}
		if err := reclaim(c, *dir); err != nil {
			log.Print(err)
		}
		select {
		case <-stop:
			log.Print("stopped")
			return
		case <-tick.C:
		}
	}
}

// provision makes a directory and a bound local volume for every claim waiting for us.
func provision(c *client, class, node, dir string) error {
	var list struct{ Items []claim }
	if _, err := c.do("GET", "/api/v1/persistentvolumeclaims", nil, &list); err != nil {
		return err
	}
	for _, pvc := range list.Items {
		a := pvc.Metadata.Annotations
		if pvc.Status.Phase != "Pending" || pvc.Spec.VolumeName != "" ||
			(a[annProvider] != provisioner && a[annBeta] != provisioner) {
			continue
		}
		if pvc.Spec.StorageClassName != class {
			log.Printf("claim %s/%s: class %q is not %q: left alone", pvc.Metadata.Namespace, pvc.Metadata.Name, pvc.Spec.StorageClassName, class)
			continue
		}
		name := "pvc-" + pvc.Metadata.UID
		path := filepath.Join(dir, name)
		// Like a fresh file system's root, and like the hostPath provisioner's: root's, 0750.
		if err := os.MkdirAll(path, 0o750); err != nil {
			return err
		}
		size := pvc.Spec.Resources.Requests["storage"]
		if size == "" {
			size = "1Gi"
		}
		modes := pvc.Spec.AccessModes
		if len(modes) == 0 {
			modes = []string{"ReadWriteOnce"}
		}
		pv := map[string]any{
			"apiVersion": "v1",
			"kind":       "PersistentVolume",
			"metadata":   map[string]any{"name": name, "annotations": map[string]string{annBy: provisioner}},
			"spec": map[string]any{
				"capacity":                      map[string]string{"storage": size},
				"accessModes":                   modes,
				"persistentVolumeReclaimPolicy": "Delete",
				"storageClassName":              class,
				"volumeMode":                    "Filesystem",
				"claimRef": map[string]string{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
					"namespace": pvc.Metadata.Namespace, "name": pvc.Metadata.Name, "uid": pvc.Metadata.UID},
				"local": map[string]string{"path": path},
				"nodeAffinity": map[string]any{"required": map[string]any{"nodeSelectorTerms": []any{
					map[string]any{"matchExpressions": []any{map[string]any{
						"key": "kubernetes.io/hostname", "operator": "In", "values": []string{node}}}}}}},
			},
		}
		code, err := c.do("POST", "/api/v1/persistentvolumes", pv, nil)
		if code == http.StatusConflict {
			continue // made on an earlier pass; the controller manager binds it
		}
		if err != nil {
			return err
		}
		log.Printf("claim %s/%s: volume %s at %s (%s)", pvc.Metadata.Namespace, pvc.Metadata.Name, name, path, size)
	}
	return nil
}

// reclaim removes the directory and the volume of every claim that was deleted.
func reclaim(c *client, dir string) error {
	var list struct{ Items []volume }
	if _, err := c.do("GET", "/api/v1/persistentvolumes", nil, &list); err != nil {
		return err
	}
	for _, pv := range list.Items {
		if pv.Metadata.Annotations[annBy] != provisioner || pv.Status.Phase != "Released" ||
			pv.Spec.PersistentVolumeReclaimPolicy != "Delete" || pv.Spec.Local == nil {
			continue
		}
		path := pv.Spec.Local.Path
		if filepath.Dir(path) != filepath.Clean(dir) {
			log.Printf("volume %s: %s is not under %s: left on disk", pv.Metadata.Name, path, dir)
		} else if err := os.RemoveAll(path); err != nil {
			return err
		}
		code, err := c.do("DELETE", "/api/v1/persistentvolumes/"+pv.Metadata.Name, nil, nil)
		if err != nil && code != http.StatusNotFound {
			return err
		}
		log.Printf("volume %s: deleted with %s (its claim is gone)", pv.Metadata.Name, path)
	}
	return nil
}
