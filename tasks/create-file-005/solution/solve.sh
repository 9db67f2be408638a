#!/bin/bash
mkdir -p /app/bell && printf '%s\n' 'raven rabbit plum' 'cactus trim' > /app/bell/dusty_ember.txt
