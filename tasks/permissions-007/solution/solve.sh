#!/bin/bash
chmod 400 /app/canyon/swift_reef.key
chmod 750 /app/canyon/happy_salmon.sh
chmod 664 /app/canyon/olive_plum.txt
