! SPDX-License-Identifier: MIT
! api_example.f90 - marks, a report and statistics from Fortran (include/heaplens.f90).
! Built by `make demo`: gfortran heaplens.f90 api_example.f90 $(pkg-config --libs heaplens)
program api_example
    use heaplens
    implicit none
    integer(c_int64_t) :: mark
    type(heaplens_stats_t) :: st
    real(c_double), allocatable :: grid(:, :), tmp(:)
    integer :: rc, step

    print '(a,i0)', 'traced ', heaplens_is_traced()
    mark = heaplens_mark()
    allocate(grid(200, 200))
    grid = 0
    do step = 1, 10
        allocate(tmp(200))
        tmp = step
        grid(:, step) = tmp
        deallocate(tmp)
    end do
    print '(a,f8.1)', 'result ', sum(grid)
    flush(6)
    rc = heaplens_report_since(mark, 1_c_int, HEAPLENS_TEXT) ! the grid, still live
    deallocate(grid)
    if (heaplens_stats(st) == 0) print '(a,i0,a,i0)', 'live bytes ', st%live_bytes, &
        ' allocations ', st%allocations
end program
