#!/bin/bash
cd /app && tar czf /app/amber-orbit.tar.gz topaz/*.json
