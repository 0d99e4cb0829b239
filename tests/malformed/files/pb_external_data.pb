Bwj
location/etc/passwdp