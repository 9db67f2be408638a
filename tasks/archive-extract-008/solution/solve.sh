#!/bin/bash
mkdir -p /app/robin && tar xzf /app/vivid-bison.tar.gz -C /app/robin
grep '^token=' /app/robin/flint/cedar/fancy_wolf.ini | cut -d= -f2 > /app/value.txt
