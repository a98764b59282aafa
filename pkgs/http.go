package pkgs

import (
	"encoding/json"
	"net/http"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// CatalogPath is where the daemon's --http listener serves this server's
// catalog of public packages: a remote's <baseUrl>/public/packages.
const CatalogPath = "/public/packages"

// CatalogHandler serves CatalogPath: GET answers pkg.public.list's
// result for this server, made as the kernel (the catalog is public: it
// lists only packages marked public with pkg.public.set). Any other
// method is 405.
func CatalogHandler(k *kernel.Kernel) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		res, err := kernel.Do(req.Context(), k, k.KernelCaller(), abi.PkgPublicList, &abi.PkgPublicListArgs{})
		if err != nil {
			http.Error(w, err.Error(), abi.Code(err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res)
	})
}
