#!/bin/bash
grep -rl 'thunder-8822' /app/bison > /app/boulder_matches.txt
