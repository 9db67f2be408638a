#!/bin/bash
grep -rl 'eagle-6013' /app/marble > /app/matches.txt
