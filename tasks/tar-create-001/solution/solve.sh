#!/bin/bash
cd /app && tar czf /app/gentle-owl.tar.gz flint/*.cfg
