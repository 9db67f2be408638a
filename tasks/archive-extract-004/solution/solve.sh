#!/bin/bash
mkdir -p /app/nutmeg && tar xzf /app/smooth-plum.tar.gz -C /app/nutmeg
grep '^license=' /app/nutmeg/castle/meteor/crimson_fig.ini | cut -d= -f2 > /app/value.txt
