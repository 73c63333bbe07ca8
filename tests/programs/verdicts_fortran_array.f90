! verdicts_fortran_array: a 1000x1000 real(8) allocatable array (8,000,000 bytes) left allocated
! when the main program ends. Nothing points to it at exit: at -O2 its descriptor lives only in
! registers, at -O0 in the frame of MAIN__, which has returned before exit() runs. heaplens and
! memcheck with the client placed above 10^8 say definitely lost; memcheck in its default
! layout says possibly lost, because its heap then lies below 10^8, where the _hash words of
! libgfortran's class vtables (gfortran type hashes, < 10^8) fall inside the array
! (tests/integration/verdicts_real.sh).
program verdicts_fortran_array
  implicit none
  real(8), allocatable :: a(:,:)
  integer :: i, j
  allocate(a(1000, 1000))
  do j = 1, 1000
    do i = 1, 1000
      a(i, j) = real(i + j, 8)
    end do
  end do
  print '(f0.1)', sum(a)
end program verdicts_fortran_array
