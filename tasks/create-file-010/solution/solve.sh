#!/bin/bash
mkdir -p /app/reef && printf '%s\n' 'check drum' 'planet clover tidy' 'warm move' > /app/reef/rapid_marble.txt
