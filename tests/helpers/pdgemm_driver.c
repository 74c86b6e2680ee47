/* ScaLAPACK's own PDGEMM on the cases tests/test_scalapack.py writes (its own process, its own MPI).

   Usage: mpiexec.mpich -n P*Q pdgemm_driver NPROW NPCOL CASES
   CASES: one case per line,
     transa transb m n k alpha beta ia ja ib jb ic jc
     MA NA MBA NBA RSRCA CSRCA  MB NB MBB NBB RSRCB CSRCB  MC NC MBC NBC RSRCC CSRCC
     A.bin B.bin C.bin OUT.bin
   *.bin: the global matrices, column-major float64. Each rank takes its blocks of A, B, C by the
   descriptors on a row-major BLACS grid, PDGEMM updates C, and each rank writes its blocks of C
   into OUT.bin (the global C, column-major). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

void Cblacs_pinfo(int *mypnum, int *nprocs);
void Cblacs_get(int context, int request, int *value);
void Cblacs_gridinit(int *context, const char *order, int nprow, int npcol);
void Cblacs_gridinfo(int context, int *nprow, int *npcol, int *myrow, int *mycol);
void Cblacs_gridexit(int context);
int numroc_(const int *n, const int *nb, const int *iproc, const int *isrcproc, const int *nprocs);
void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb, const int *irsrc,
               const int *icsrc, const int *ictxt, const int *lld, int *info);
void pdgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
             const double *alpha, const double *a, const int *ia, const int *ja, const int *desca,
             const double *b, const int *ib, const int *jb, const int *descb, const double *beta,
             double *c, const int *ic, const int *jc, const int *descc);

typedef struct { int m, n, mb, nb, rsrc, csrc; } Shape;

static long global_index(int l, int nb, int iproc, int src, int nprocs) {
    int dist = (nprocs + iproc - src) % nprocs;
    return ((long)(l / nb) * nprocs + dist) * nb + l % nb;
}

/* This rank's blocks of the global column-major matrix in path; fills desc. */
static double *local_blocks(const char *path, const Shape *s, int ctxt, int myrow, int mycol,
                            int nprow, int npcol, int *desc) {
    int mloc = numroc_(&s->m, &s->mb, &myrow, &s->rsrc, &nprow);
    int nloc = numroc_(&s->n, &s->nb, &mycol, &s->csrc, &npcol);
    int lld = mloc > 1 ? mloc : 1, info;
    double *global = malloc(sizeof(double) * ((size_t)s->m * s->n + 1));
    FILE *f = fopen(path, "rb");
    if (!f || fread(global, sizeof(double), (size_t)s->m * s->n, f) != (size_t)s->m * s->n) {
        fprintf(stderr, "cannot read %s\n", path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fclose(f);
    double *local = malloc(sizeof(double) * ((size_t)lld * nloc + 1));
    for (int jl = 0; jl < nloc; jl++)
        for (int il = 0; il < mloc; il++)
            local[il + (size_t)jl * lld] =
                global[global_index(il, s->mb, myrow, s->rsrc, nprow) +
                       global_index(jl, s->nb, mycol, s->csrc, npcol) * s->m];
    free(global);
    descinit_(desc, &s->m, &s->n, &s->mb, &s->nb, &s->rsrc, &s->csrc, &ctxt, &lld, &info);
    if (info != 0) {
        fprintf(stderr, "descinit failed: %d\n", info);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return local;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc != 4) {
        fprintf(stderr, "usage: pdgemm_driver NPROW NPCOL CASES\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int nprow = atoi(argv[1]), npcol = atoi(argv[2]), me, size, ctxt, myrow, mycol, p, q;
    Cblacs_pinfo(&me, &size);
    Cblacs_get(-1, 0, &ctxt);
    Cblacs_gridinit(&ctxt, "Row", nprow, npcol);
    Cblacs_gridinfo(ctxt, &p, &q, &myrow, &mycol);
    FILE *cases = fopen(argv[3], "r");
    char ta[4], tb[4], pa[4096], pb[4096], pc[4096], out[4096];
    int m, n, k, ia, ja, ib, jb, ic, jc;
    double alpha, beta;
    Shape sa, sb, sc;
    while (fscanf(cases, "%3s %3s %d %d %d %lf %lf %d %d %d %d %d %d"
                         " %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %4095s %4095s %4095s %4095s",
                  ta, tb, &m, &n, &k, &alpha, &beta, &ia, &ja, &ib, &jb, &ic, &jc,
                  &sa.m, &sa.n, &sa.mb, &sa.nb, &sa.rsrc, &sa.csrc, &sb.m, &sb.n, &sb.mb, &sb.nb,
                  &sb.rsrc, &sb.csrc, &sc.m, &sc.n, &sc.mb, &sc.nb, &sc.rsrc, &sc.csrc,
                  pa, pb, pc, out) == 35) {
        int desca[9], descb[9], descc[9];
        double *a = local_blocks(pa, &sa, ctxt, myrow, mycol, nprow, npcol, desca);
        double *b = local_blocks(pb, &sb, ctxt, myrow, mycol, nprow, npcol, descb);
        double *c = local_blocks(pc, &sc, ctxt, myrow, mycol, nprow, npcol, descc);
        pdgemm_(ta, tb, &m, &n, &k, &alpha, a, &ia, &ja, desca, b, &ib, &jb, descb, &beta, c, &ic, &jc, descc);
        int mloc = numroc_(&sc.m, &sc.mb, &myrow, &sc.rsrc, &nprow);
        int nloc = numroc_(&sc.n, &sc.nb, &mycol, &sc.csrc, &npcol);
        if (me == 0) {
            int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || ftruncate(fd, (off_t)sizeof(double) * sc.m * sc.n) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
            close(fd);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        int fd = open(out, O_WRONLY);
        for (int jl = 0; jl < nloc; jl++)
            for (int il = 0; il < mloc; il++) {
                long g = global_index(il, sc.mb, myrow, sc.rsrc, nprow) +
                         global_index(jl, sc.nb, mycol, sc.csrc, npcol) * sc.m;
                if (pwrite(fd, &c[il + (size_t)jl * descc[8]], sizeof(double), (off_t)g * sizeof(double)) !=
                    sizeof(double))
                    MPI_Abort(MPI_COMM_WORLD, 1);
            }
        close(fd);
        MPI_Barrier(MPI_COMM_WORLD);
        free(a), free(b), free(c);
    }
    fclose(cases);
    Cblacs_gridexit(ctxt);
    MPI_Finalize();
    return 0;
}
