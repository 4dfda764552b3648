CL.ready();
