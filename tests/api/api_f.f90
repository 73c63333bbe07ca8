! SPDX-License-Identifier: MIT
! api_f.f90 - every function of the heaplens API from Fortran (tests/integration/api.sh).
module api_f_callbacks
    use, intrinsic :: iso_c_binding
    implicit none
    integer :: watched = 0, crossed = 0
contains
    subroutine on_release(ptr, event, where, arg) bind(c)
        type(c_ptr), value :: ptr, where, arg
        integer(c_int), value :: event
        watched = watched + 1
        print '(a,i0)', 'watch event ', event
    end subroutine
    subroutine on_threshold(which, bytes, arg) bind(c)
        integer(c_int), value :: which
        integer(c_size_t), value :: bytes
        type(c_ptr), value :: arg
        crossed = crossed + 1
        print '(a,i0,a,i0)', 'threshold ', which, ' bytes ', bytes
    end subroutine
end module

program api_f
    use heaplens
    use api_f_callbacks
    implicit none
    integer(c_int64_t) :: m
    type(heaplens_leak_counts) :: counts
    type(heaplens_stats_t) :: st
    real(c_double), allocatable, target :: a(:), b(:), big(:)
    integer :: rc

    print '(a,i0)', 'is_traced ', heaplens_is_traced()
    print '(a,i0)', 'pause ', heaplens_pause()
    print '(a,i0)', 'resume ', heaplens_resume()
    m = heaplens_mark()
    print '(a,l1)', 'mark>0 ', m > 0
    allocate(a(1000))
    a = 1.0d0
    flush(6)
    print '(a,i0)', 'report_since ', heaplens_report_since(m, 1_c_int, HEAPLENS_TEXT)
    flush(6)
    print '(a,i0)', 'report ', heaplens_report(2_c_int, HEAPLENS_JSON)
    rc = heaplens_leak_check(counts)
    print '(a,i0)', 'leak_check ', rc
    rc = heaplens_leak_check_new(counts)
    print '(a,i0)', 'leak_check_new ', rc
    print '(a,i0)', 'ignore ', heaplens_ignore(c_loc(a))
    allocate(b(500))
    print '(a,i0)', 'watch ', heaplens_watch(c_loc(b), c_funloc(on_release), c_null_ptr)
    deallocate(b)
    print '(a,i0)', 'tag ', heaplens_tag(3_c_int, 4_c_int)
    print '(a,i0)', 'untag ', heaplens_untag()
    print '(a,i0)', 'set_thresholds ', heaplens_set_thresholds(800000_c_size_t, 0_c_size_t, &
        0_c_int64_t, c_funloc(on_threshold), c_null_ptr)
    allocate(big(125000))
    big = 2.0d0
    print '(a,i0)', 'stats ', heaplens_stats(st)
    print '(a,l1)', 'stats live>=8000 ', st%live_bytes >= 8000
    print '(a,i0,a,i0)', 'callbacks watch ', watched, ' threshold ', crossed
    print '(a,f10.1)', 'work ', sum(a) + sum(big)
    deallocate(big)
end program
